import { searchPassages } from '../retrieval/service.js';
import { AnswerModelError, GenerationClock, notFoundAnswer, pageOf, type NumberedPassage } from './answer-model.js';
import { checkSentences, withoutMarkers, type CheckedSentence } from './citations.js';
import type { ReasoningStep } from './events.js';
import type { Run } from './execution.js';
import { agentLimits } from './input.js';
import type { AgentDependencies } from './service.js';

const numbered = (passages: Awaited<ReturnType<typeof searchPassages>>, first: number, hop: number): NumberedPassage[] =>
  passages.map((passage, index) => ({ ...passage, number: first + index, page: pageOf(passage.metadata), hop }));

/** Fast mode: one search, and the answer streamed as it is written. */
export async function fastAnswer(dependencies: AgentDependencies, run: Run, query: string, signal: AbortSignal, clock: GenerationClock) {
  const found = await searchPassages(dependencies.retrieval, { query, workspaceIds: run.workspaceIds, topK: agentLimits.fastPassages }, signal);
  const passages = numbered(found, 1, 0);
  let answer = '';
  for await (const token of dependencies.answerModel.answer({ question: query, passages, mode: 'fast', signal, clock })) {
    signal.throwIfAborted();
    if (!token) continue;
    answer += token;
    run.token(token);
  }
  if (answer.trim().length === 0) throw new AnswerModelError('it returned an empty answer');
  return { passages, answer, checked: answer.trim() === notFoundAnswer ? [] : checkSentences(answer, passages) };
}

/**
 * Deep mode: the question is decomposed, searched, and refined from what was found (the next
 * query follows what the evidence names), until the evidence covers the question or the budget
 * ends. The answer is written whole, each sentence checked against the passage it cites, and
 * only the supported ones are streamed.
 */
export async function deepResearch(dependencies: AgentDependencies, run: Run, query: string, signal: AbortSignal, clock: GenerationClock) {
  const { answerModel } = dependencies;
  const started = performance.now();
  const budget = run.budget;
  let stepIndex = 0;
  const step = (fields: Omit<ReasoningStep, 'index'>) => {
    stepIndex += 1;
    run.emit({ type: 'reasoning', steps: [{ index: stepIndex, ...fields }] });
  };
  const evidence: NumberedPassage[] = [];
  const seen = new Set<string>();
  const asked: string[] = [];
  let searches = 0;
  const outOfTime = () => performance.now() - started > budget.seconds * 1000;

  const search = async (queries: string[], hop: number) => {
    const found: NumberedPassage[] = [];
    for (const text of queries) {
      if (searches >= budget.searches || outOfTime()) break;
      searches += 1;
      asked.push(text);
      const hits = await searchPassages(dependencies.retrieval, { query: text, workspaceIds: run.workspaceIds, topK: agentLimits.deepPassagesPerSearch, exclude: seen }, signal);
      for (const hit of hits) {
        if (seen.has(hit.chunkId)) continue;
        seen.add(hit.chunkId);
        const passage = { ...hit, number: evidence.length + 1, page: pageOf(hit.metadata), hop };
        evidence.push(passage);
        found.push(passage);
      }
    }
    return found;
  };
  const described = (passages: readonly NumberedPassage[]) =>
    passages.map((passage) => ({ documentId: passage.documentId, filename: passage.filename, chunkIndex: passage.chunkIndex, page: passage.page, score: passage.score }));

  const subQuestions = (await answerModel.decompose(query, signal, clock)).slice(0, budget.searches);
  step({
    kind: 'decompose',
    queries: subQuestions,
    found: [],
    decision: 'continue',
    reason: subQuestions.length > 1 ? `the question compares or joins ${subQuestions.length - 1} things; each is searched` : 'the question is searched as it is',
  });
  let found = await search(subQuestions, 1);
  let lastQueries = subQuestions;
  for (let hop = 1; ; hop += 1) {
    const exhausted = hop >= budget.hops ? `the budget of ${budget.hops} hops is spent` : searches >= budget.searches ? `the budget of ${budget.searches} searches is spent` : outOfTime() ? `the budget of ${budget.seconds} s is spent` : null;
    const next =
      exhausted || evidence.length === 0 || (hop > 1 && found.length === 0)
        ? null
        : await answerModel.nextQueries({ question: query, evidence: found.length > 0 ? found : evidence, asked, signal, clock });
    const stop =
      exhausted ??
      (evidence.length === 0
        ? 'nothing was found to follow'
        : hop > 1 && found.length === 0
          ? 'the refined searches found nothing new'
          : next!.queries.length === 0
            ? next!.reason
            : null);
    step({
      kind: hop === 1 ? 'search' : 'refine',
      queries: lastQueries,
      found: described(found),
      decision: stop ? 'stop' : 'continue',
      reason: stop ?? next!.reason,
    });
    if (stop) break;
    lastQueries = next!.queries;
    found = await search(lastQueries, hop + 1);
  }

  let answer = '';
  for await (const token of answerModel.answer({ question: query, passages: evidence, mode: 'deep', signal, clock })) answer += token;
  if (answer.trim().length === 0) throw new AnswerModelError('it returned an empty answer');
  const checked = answer.trim() === notFoundAnswer ? [] : checkSentences(answer, evidence);
  const kept = checked.filter((sentence) => sentence.supported);
  const dropped = checked.length - kept.length;
  const verified = dropped === 0 ? answer : kept.length > 0 ? kept.map((sentence) => sentence.text).join(' ') : notFoundAnswer;
  step({
    kind: 'verify',
    queries: [],
    found: [],
    decision: 'stop',
    reason:
      checked.length === 0
        ? 'the answer makes no claim to check'
        : `${kept.length} of ${checked.length} sentences are supported by the passages they cite${dropped > 0 ? `; ${dropped} unsupported dropped: ${checked.filter((sentence) => !sentence.supported).map((sentence) => JSON.stringify(withoutMarkers(sentence.text))).join(', ')}` : ''}`,
  });
  for (const [token] of verified.matchAll(/\s*\S+/g)) run.token(token);
  const final: CheckedSentence[] = dropped === 0 ? checked : kept;
  return { passages: evidence, answer: verified, checked: final };
}
