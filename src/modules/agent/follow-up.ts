import type { Turn } from './answer-model.js';
import { namesIn, topicTerms } from './text.js';

const thingPronoun = /\b(it|its|this|that|these|those|there)\b/i;
const personPronoun = /\b(he|him|his|she|her|hers|they|them|their|theirs)\b/i;

/**
 * A follow-up made to stand alone without a language model, from the last question and answer:
 * - "what about X?" with a new name asks the last question again about X;
 * - a person pronoun ("where was she born?") stands for a name the last answer introduced, a
 *   thing pronoun ("and its revenue?") for the names of the last question (or, failing those,
 *   its words); a question opening with "and" takes them in front;
 * - a question that names something new and refers to nothing is searched as it is.
 */
export function standaloneQuestion(question: string, history: readonly Turn[]): string {
  const lastQuestion = [...history].reverse().find((turn) => turn.role === 'user');
  if (!lastQuestion) return question;
  const lastAnswer = [...history].reverse().find((turn) => turn.role === 'assistant');
  const questionNames = namesIn(lastQuestion.content);
  const newNames = namesIn(question).filter((name) => !questionNames.some((known) => known.toLowerCase() === name.toLowerCase()));
  const elliptical = /^\s*(and\s+)?(what|how)\s+about\s+/i;
  if (elliptical.test(question) && newNames.length > 0 && questionNames.length > 0) {
    let asked = lastQuestion.content;
    for (const name of questionNames) asked = asked.split(name).join(newNames.join(' '));
    return asked;
  }
  const person = personPronoun.exec(question);
  const thing = thingPronoun.exec(question);
  if (newNames.length > 0 && !person && !thing) return question;
  const introduced = lastAnswer ? namesIn(lastAnswer.content.replace(/\[\d+\]/g, '')).filter((name) => !questionNames.includes(name)) : [];
  const topic =
    person && introduced.length > 0
      ? introduced[0]!
      : questionNames.length > 0
        ? questionNames.join(' ')
        : topicTerms(lastQuestion.content).length > 0
          ? lastQuestion.content.replace(/[?.!]+$/, '')
          : '';
  if (!topic) return question;
  const followsUp = person || thing || /^\s*(and|also)\b/i.test(question) || elliptical.test(question) || topicTerms(question).length <= 1;
  if (!followsUp) return question;
  let rewritten = question.replace(/^\s*(and|also)\s+/i, '').replace(elliptical, '');
  let replaced = false;
  // The pronoun as a word of what is left of the question (a string replace would take the
  // first "he" anywhere, inside "Where" or "When").
  const pronoun = person ? personPronoun.exec(rewritten) : thing ? thingPronoun.exec(rewritten) : null;
  if (pronoun) {
    const possessive = /^(its|his|her|hers|their|theirs)$/i.test(pronoun[1]!);
    rewritten = `${rewritten.slice(0, pronoun.index)}${possessive ? `${topic}'s` : topic}${rewritten.slice(pronoun.index + pronoun[0].length)}`;
    replaced = true;
  }
  if (!replaced) rewritten = `${topic} ${rewritten}`;
  rewritten = rewritten.trim();
  return rewritten.charAt(0).toUpperCase() + rewritten.slice(1);
}
