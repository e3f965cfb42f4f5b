import type { Embedder } from '../embeddings/embedder.js';
import { notFoundAnswer, type AnswerModel, type AnswerRequest, type NumberedPassage, type Turn } from './answer-model.js';
import { fileStem } from '../ingestion/document-name.js';
import { isTableRow, rowCells, yearsOf } from '../ingestion/table-rows.js';
import { focusOf, yearPattern } from '../retrieval/query-focus.js';
import { standaloneQuestion } from './follow-up.js';
import { answerKind, askedThing, asksForDoer, holdsKind, isTitle, pronounSubject, questionMentions, referentOf } from './question-kinds.js';
import { namesIn, sentencesOf, topicTerms, type Sentence } from './text.js';

/** A sentence of a retrieved passage, scored against the question. */
export type ScoredSentence = Sentence & {
  /** What the sentence is judged by: its text, or a table row's label with its table's title. */
  about: string;
  passage: NumberedPassage;
  /** Position among its passage's sentences. */
  position: number;
  /** Its topic terms (see `topicTerms`). */
  terms: ReadonlySet<string>;
  /** Share of the question's topic terms (IDF-weighted) the sentence holds, 0 to 1. */
  lexical: number;
  /** Cosine similarity of the sentence's and the question's embeddings. */
  semantic: number;
  /**
   * Whether it holds the date or number a question of that kind asks for (`answerKind`), one
   * that the question does not state; for a question asking who did something, whether it names
   * a person the question does not, false when its own doer is a pronoun ("He made Ralph earl"
   * does not say who). Null otherwise: a capitalised word or the asked thing's name says too
   * little about a sentence to reorder an answer by.
   */
  holdsAsked: boolean | null;
  score: number;
};

export const extractiveSettings = {
  /** Sentences embedded per answer: the best by words and rank, so the time to the first token stays short. */
  embeddedSentences: 32,
  /** Fewest words a sentence needs to be part of an answer. */
  minimumWords: 4,
  /** Sentences read per passage. */
  sentencesPerPassage: 60,
  /** Sentences of each passage that are embedded whatever the others score. */
  sentencesPerPassageShortlist: 3,
  /** Below this score nothing found is taken to answer the question. */
  minimumScore: 0.55,
  /** A further sentence joins the answer when it scores at least this share of the best one. */
  companionShare: 0.92,
  /** Most sentences in a fast answer, and in a deep one. */
  fastSentences: 2,
  deepSentences: 4,
  /** What a further sentence of a deep answer must add (see `chain`). */
  chainMinimum: 0.35,
  /** Names deep research follows from one hop's evidence. */
  bridgesPerHop: 3,
} as const;

const sentenceWeights = { semantic: 0.6, lexical: 0.3, rank: 0.1, kind: 0.05, askedThing: 0.05, pronounSubject: 0.05 };

/**
 * The embedded answerer: it writes no words of its own. It selects the sentences of the retrieved
 * passages that answer the question (scored by embedding similarity and by the question's words
 * they hold, rarer words counting more), orders them and joins them, each with its citation.
 */
export function createExtractiveAnswerer(embedder: Embedder): AnswerModel & {
  scoreSentences(question: string, passages: readonly NumberedPassage[], signal: AbortSignal): Promise<ScoredSentence[]>;
} {
  /** Scores against `question` as given: callers pass its focus (`focusOf`). */
  async function scoreSentences(question: string, passages: readonly NumberedPassage[], signal: AbortSignal): Promise<ScoredSentence[]> {
    const terms = [...new Set(topicTerms(question))];
    const candidates: ScoredSentence[] = [];
    passages.forEach((passage, rank) => {
      const sentences = sentencesOf(passage.content).slice(0, extractiveSettings.sentencesPerPassage);
      let position = 0;
      sentences.forEach((sentence, index) => {
        // A heading or a label is no answer: a sentence has a few words at least and is not a title, a table row a label and a figure.
        const answers = isTableRow(sentence.text)
          ? /\p{L}/u.test(rowCells(sentence.text).label)
          : (sentence.text.match(/[\p{L}\p{N}]+/gu)?.length ?? 0) >= extractiveSettings.minimumWords && !isTitle(sentence.text);
        if (!answers) return;
        // A row is judged by its label and its table's title, not by its figures.
        const about = isTableRow(sentence.text) ? `${tableTitle(passage.content, sentence.start)} ${rowCells(sentence.text).label}` : sentence.text;
        const terms = new Set(topicTerms(`${about} ${referentOf(sentences, index)}`));
        candidates.push({ ...sentence, about, passage, position: position++, terms, lexical: 0, semantic: 0, holdsAsked: null, score: 1 - rank / Math.max(passages.length, 1) });
      });
    });
    if (candidates.length === 0) return [];
    const weightOf = new Map(
      terms.map((term) => {
        const holding = candidates.filter((candidate) => candidate.terms.has(term)).length;
        return [term, Math.log(1 + candidates.length / (1 + holding))];
      }),
    );
    const totalWeight = [...weightOf.values()].reduce((sum, weight) => sum + weight, 0) || 1;
    // A question's words that name the passage's document (its file name, its title) are held by
    // each of its sentences: "Boeing" and "2018" need not be repeated by the balance sheet's row
    // of Boeing's 2018 filing.
    const namedBy = new Map(passages.map((passage) => [passage, new Set(nameTermsOf(passage))]));
    for (const candidate of candidates) {
      const named = namedBy.get(candidate.passage)!;
      candidate.lexical = terms.reduce((sum, term) => sum + (candidate.terms.has(term) || named.has(term) ? weightOf.get(term)! : 0), 0) / totalWeight;
    }
    // Only the likeliest sentences are embedded: each passage's best by the words they hold, then
    // the best of the rest by words and their passage's rank.
    const byWords = (a: ScoredSentence, b: ScoredSentence) => b.lexical + 0.2 * b.score - (a.lexical + 0.2 * a.score) || a.position - b.position;
    const picked = new Set<ScoredSentence>();
    for (const passage of passages) {
      for (const candidate of candidates.filter((item) => item.passage === passage).sort(byWords).slice(0, extractiveSettings.sentencesPerPassageShortlist)) picked.add(candidate);
    }
    for (const candidate of [...candidates].sort(byWords)) {
      if (picked.size >= extractiveSettings.embeddedSentences) break;
      picked.add(candidate);
    }
    const shortlist = [...picked].slice(0, Math.max(extractiveSettings.embeddedSentences, passages.length * extractiveSettings.sentencesPerPassageShortlist));
    // A sentence is embedded with its document's name, as chunks are indexed with theirs, when the
    // passages come from documents of different names: "She was born in Ghent" is about the
    // document "Ilse Marant". Among passages of one document the name tells no sentence apart.
    const nameOf = new Map(passages.map((passage) => [passage, documentNameOf(passage)]));
    const namesTellApart = new Set(nameOf.values()).size > 1;
    const [[questionVector], sentenceVectors] = await Promise.all([
      embedder.embed([question], 'query', signal),
      embedder.embed(
        shortlist.map((candidate) => (namesTellApart && nameOf.get(candidate.passage) ? `${nameOf.get(candidate.passage)}\n${candidate.about}` : candidate.about)),
        'passage',
        signal,
      ),
    ]);
    const kind = answerKind(question);
    const thing = kind ? null : askedThing(question);
    const doer = kind === 'person' && asksForDoer(question);
    shortlist.forEach((candidate, index) => {
      candidate.semantic = dot(questionVector!, sentenceVectors[index]!);
      const rankPrior = candidate.score;
      const ofKind = kind !== null && holdsKind(candidate.text, question, kind);
      const namesThing = thing !== null && candidate.terms.has(thing);
      const pronoun = pronounSubject.test(candidate.text);
      candidate.holdsAsked = kind === 'date' || kind === 'quantity' ? ofKind : doer ? (pronoun ? false : ofKind || null) : null;
      candidate.score =
        sentenceWeights.semantic * candidate.semantic +
        sentenceWeights.lexical * candidate.lexical +
        sentenceWeights.rank * rankPrior +
        (ofKind ? sentenceWeights.kind : 0) +
        (namesThing ? sentenceWeights.askedThing : 0) -
        (pronoun ? sentenceWeights.pronounSubject : 0);
    });
    return shortlist.sort((a, b) => b.score - a.score);
  }

  function compose(question: string, chosen: ScoredSentence[]): string {
    if (chosen.length === 0) return notFoundAnswer;
    // The sentence that answers first: the best, unless it lacks the date, number or doer asked
    // for and another chosen sentence holds one (`holdsAsked`). The others in reading order:
    // by passage as cited, then by place in the passage.
    const leading = chosen[0]!.holdsAsked === false ? chosen.findIndex((sentence) => sentence.holdsAsked) : 0;
    const lead = chosen[Math.max(leading, 0)]!;
    const rest = chosen.filter((sentence) => sentence !== lead);
    const ordered = [lead!, ...rest.sort((a, b) => a.passage.number - b.passage.number || a.position - b.position)];
    return ordered.map((sentence) => cite(isTableRow(sentence.text) ? rowStatement(question, sentence) : sentence.text, sentence.passage.number)).join(' ');
  }

  return {
    kind: 'extractive',
    scoreSentences,

    async rewrite(question: string, history: readonly Turn[]) {
      return standaloneQuestion(question, history);
    },

    async decompose(asked: string) {
      // What is asked, not the instructions around it (whose names would be taken for things compared).
      const question = focusOf(asked);
      const names = namesIn(question);
      const comparing = names.length >= 2 && /\b(or|both|and|same|either|neither|more|less|older|younger|first|earlier|later)\b/i.test(question);
      if (!comparing) return [question];
      const rest = question.replace(new RegExp(names.map(escapeRegExp).join('|'), 'g'), ' ').replace(/\s+/g, ' ');
      const about = topicTerms(rest).length > 0 ? rest.replace(/[?.!]+$/, '').trim() : '';
      return [question, ...names.slice(0, 3).map((name) => `${name} ${about}`.trim())];
    },

    async nextQueries({ question: wholeQuestion, evidence, asked, signal }) {
      const question = focusOf(wholeQuestion);
      const known = new Set([...namesIn(question), ...asked.flatMap((query) => namesIn(query))].map((name) => name.toLowerCase()));
      const scored = await scoreSentences(question, evidence, signal);
      // Bridges: names the best evidence mentions that no search has followed yet, the names of
      // better sentences first, longer names first among equals.
      const bridges = new Map<string, { value: number; from: ScoredSentence }>();
      for (const sentence of scored.slice(0, 8)) {
        for (const name of namesIn(sentence.text)) {
          const key = name.toLowerCase();
          if (known.has(key) || questionMentions(question, name) || bridges.has(key)) continue;
          bridges.set(key, { value: sentence.score + 0.05 * Math.min(name.split(' ').length, 3), from: sentence });
        }
      }
      const followed = [...bridges.entries()].sort((a, b) => b[1].value - a[1].value).slice(0, extractiveSettings.bridgesPerHop);
      if (followed.length === 0) return { queries: [], reason: 'the evidence names nothing the searches have not followed' };
      const original = (name: string) => namesIn(followed.find(([key]) => key === name)![1].from.text).find((candidate) => candidate.toLowerCase() === name) ?? name;
      return {
        queries: followed.map(([name]) => `${original(name)} ${question}`),
        reason: `the evidence names ${followed.map(([name, { from }]) => `${original(name)} ([${from.passage.number}] ${from.passage.filename})`).join(', ')}, which the question does not: following them`,
      };
    },

    async *answer({ question: wholeQuestion, passages, mode, signal }: AnswerRequest) {
      // Sentences are judged against what is asked, not against the instructions around it.
      const question = focusOf(wholeQuestion);
      const scored = await scoreSentences(question, passages, signal);
      const best = scored[0];
      let chosen: ScoredSentence[] = [];
      if (best && best.score >= extractiveSettings.minimumScore && holdsNumbersOf(question, passages.map((passage) => passage.content).join('\n'))) {
        if (mode === 'deep') chosen = chain(question, scored, extractiveSettings.deepSentences);
        else {
          // A second sentence from another passage when it adds what the first lacks (the other
          // half of a comparison, the page a name leads to); else one that scores nearly as well.
          const chained = chain(question, scored, extractiveSettings.fastSentences);
          chosen =
            chained.length > 1 && chained[1]!.passage !== best.passage
              ? chained
              : [best, ...scored.slice(1, extractiveSettings.fastSentences).filter((candidate) => candidate.score >= extractiveSettings.companionShare * best.score)];
        }
      }
      yield* asTokens(compose(question, chosen));
    },
  };
}

/**
 * Deep mode's answer: a chain of sentences, each chosen for what it adds. After the best one, the
 * next is the one that holds most of the question's words not yet covered, or that names what
 * the chosen sentences introduced (the bridge a multi-hop question turns on: "designed by Ilse
 * Marant" leads to "Ilse Marant was born in Ghent"); it stops when nothing adds enough.
 */
function chain(question: string, scored: readonly ScoredSentence[], most: number): ScoredSentence[] {
  const questionTerms = new Set(topicTerms(question));
  const questionNames = new Set(namesIn(question).map((name) => name.toLowerCase()));
  const chosen = [scored[0]!];
  const covered = new Set([...scored[0]!.terms].filter((term) => questionTerms.has(term)));
  const bridges = new Set(namesIn(scored[0]!.text).map((name) => name.toLowerCase()).filter((name) => !questionNames.has(name)));
  while (chosen.length < most) {
    let next: { sentence: ScoredSentence; value: number } | undefined;
    for (const sentence of scored) {
      if (chosen.includes(sentence)) continue;
      const added = [...sentence.terms].filter((term) => questionTerms.has(term) && !covered.has(term));
      const gain = added.length / Math.max(questionTerms.size, 1);
      const lower = sentence.text.toLowerCase();
      const linked = [...bridges].some((name) => lower.includes(name)) || chosen.some((other) => other.passage === sentence.passage && Math.abs(other.position - sentence.position) === 1);
      const value = 2 * gain + (linked ? 0.25 : 0) + 0.3 * sentence.semantic;
      if (gain === 0 && !linked) continue;
      if (!next || value > next.value) next = { sentence, value };
    }
    if (!next || next.value < extractiveSettings.chainMinimum) break;
    chosen.push(next.sentence);
    for (const term of next.sentence.terms) if (questionTerms.has(term)) covered.add(term);
    for (const name of namesIn(next.sentence.text)) if (!questionNames.has(name.toLowerCase())) bridges.add(name.toLowerCase());
  }
  return chosen;
}

/**
 * Whether the passages found hold every year the question names: passages
 * about 1985 do not answer a question about 1995, however alike the rest. All the passages, not
 * only the best one: a multi-hop question's number may be in the other hop's passage.
 */
function holdsNumbersOf(question: string, passage: string): boolean {
  // Years only: other numbers of a question are often its own arithmetic ("365 ×", "two decimals").
  const numbers = [...question.matchAll(yearPattern)].map(([year]) => year);
  return numbers.every((number) => new RegExp(`(?<![\\d.,])${number.replace(/[.,]/g, '[.,]')}(?![\\d])`).test(passage));
}


/** A passage's document name as it is embedded with its sentences: its file stem, unless that holds no word. */
function documentNameOf(passage: NumberedPassage): string {
  const name = fileStem(passage.filename).replace(/_+/g, ' ');
  return /\p{L}{2,}/u.test(name) ? name : '';
}

/** The topic terms of a passage's document name: its file name's words and its title. */
function nameTermsOf(passage: NumberedPassage): string[] {
  const title = (passage.metadata as Record<string, unknown> | null)?.title;
  return topicTerms(`${fileStem(passage.filename)} ${typeof title === 'string' ? title : ''}`);
}

/** The title of the table a row belongs to: the lines of the passage before the row that are not rows. */
function tableTitle(content: string, rowStart: number): string {
  // The last piece is the row's own line up to the row: not a line before it.
  const lines = content.slice(0, rowStart).split('\n').slice(0, -1);
  const title: string[] = [];
  for (let index = lines.length - 1; index >= 0 && title.length < 6; index--) {
    const line = lines[index]!.trim();
    if (line === '') break;
    if (!isTableRow(line) || yearsOf(line).length > 0) title.unshift(line);
  }
  return title.join(' ');
}

/**
 * A table row as an answer: its label, each figure with the year of its column (the one the
 * question asks about first) and the table's unit: "Cost of sales: 111,934 in 2017, 88,265 in
 * 2016 (in millions)". A row whose columns cannot be matched to years keeps its figures in order.
 */
export function rowStatement(question: string, sentence: Pick<ScoredSentence, 'text' | 'start' | 'passage'>): string {
  const { label, figures } = rowCells(sentence.text);
  const before = sentence.passage.content.slice(0, sentence.start).split('\n');
  const yearsLine = before.findLast((line) => yearsOf(line).length > 0);
  const years = yearsLine ? yearsOf(yearsLine) : [];
  const unit = before.map((line) => /\bin (millions|thousands|billions)\b/i.exec(line)?.[1]).findLast((found) => found !== undefined);
  const askedYears = new Set([...question.matchAll(yearPattern)].map(([year]) => Number(year)));
  const name = label.replace(/[:\s]+$/, '');
  const unitText = unit && !figures.every((figure) => figure.endsWith('%')) ? ` (in ${unit.toLowerCase()})` : '';
  if (years.length !== figures.length) return `${name}: ${figures.join(', ')}${unitText}.`;
  const columns = figures.map((figure, index) => ({ figure, year: years[index]! }));
  columns.sort((a, b) => Number(askedYears.has(b.year)) - Number(askedYears.has(a.year)));
  return `${name}: ${columns.map(({ figure, year }) => `${figure} in ${year}`).join(', ')}${unitText}.`;
}

function dot(a: Float32Array, b: Float32Array) {
  let sum = 0;
  for (let index = 0; index < a.length; index += 1) sum += a[index]! * b[index]!;
  return sum;
}

/** `text [n].`: the citation goes before the sentence's closing punctuation. */
function cite(text: string, number: number) {
  // Closing quotes and brackets of any script („…“, «…», 「…」) and invisible format characters.
  const closing = /[.!?…。！？][\p{Pe}\p{Pf}\p{Pi}\p{Cf}"'\s]*$/u.exec(text);
  return closing ? `${text.slice(0, closing.index)} [${number}]${closing[0]}` : `${text} [${number}]`;
}

/** Words with the spaces after them, as a model streams its tokens. */
export function* asTokens(text: string): Generator<string> {
  for (const [token] of text.matchAll(/\s*\S+/g)) yield token;
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
