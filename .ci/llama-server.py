"""llama-cpp-python's server (`python -m llama_cpp.server`, same arguments) with a `gemma3` chat
format. The Gemma 3 270M file has no chat template, so the server would fall back to Llama 2's
format, and its own `gemma` format drops the system message. Gemma 3's template puts the system
message at the head of the first user turn; so does this one."""
import runpy

from llama_cpp import llama_chat_format as formats


@formats.register_chat_format("gemma3")
def format_gemma3(messages, **kwargs):
    system = "\n\n".join(message["content"] or "" for message in messages if message["role"] == "system")
    prompt = ""
    for index, message in enumerate(message for message in messages if message["role"] != "system"):
        role = "model" if message["role"] == "assistant" else "user"
        content = message["content"] or ""
        if index == 0 and system:
            content = f"{system}\n\n{content}"
        prompt += f"<start_of_turn>{role}\n{content}<end_of_turn>\n"
    prompt += "<start_of_turn>model\n"
    return formats.ChatFormatterResponse(prompt=prompt, stop="<end_of_turn>")


runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
