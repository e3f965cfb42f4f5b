import { yearPattern } from '../retrieval/query-focus.js';
import { namesIn, topicTerms, type Sentence } from './text.js';

/** What a question asks for, from its question words: a person, a date, a place or a quantity. */
export type AnswerKind = 'person' | 'date' | 'place' | 'quantity';

export function answerKind(question: string): AnswerKind | null {
  const asked = question.toLowerCase();
  if (/\b(who|whom|whose)\b/.test(asked)) return 'person';
  if (/\bwhen\b|\bwhat (year|date|month|day)\b|\bin which (year|month)\b/.test(asked)) return 'date';
  if (/\bwhere\b|\bin (which|what) (city|country|state|town|region|county|place)\b/.test(asked)) return 'place';
  if (/\bhow (much|many|large|big|long|old)\b|\b(amount|number|total|percentage|ratio|rate|margin|in (usd|dollars|millions|billions|thousands|percent))\b/.test(asked)) return 'quantity';
  return null;
}

/** Whether a who-question asks who did something ("Who made Ralph earl?"), not whom someone did it to ("Who did Edward make archbishop?"). */
export function asksForDoer(question: string): boolean {
  return /\bwho\b(?!\s+(?:did|does|do)\b)/i.test(question) && !/\bwhom\b/i.test(question);
}

// Words after "what" or "which" that do not name the thing asked for.
const notAThing = new Set(
  'is are was were be been does do did has have had can could would will should may might must the a an of in on at to for about one ones if kind kinds type types sort sorts form forms'.split(' '),
);

/**
 * The thing a what/which question asks for, as an analysed term: "What kind of arches does
 * Norman architecture have?" asks for arches, "What tradition were the monks known for?" for a
 * tradition, "What theoretical device ..." for a device (the last word before the verb, within
 * three words, ended by a verb such as "is" or "does", or by an article or a preposition). The sentence that answers usually names
 * it. Null for questions of other forms, and for those that ask for a person, date, place or
 * quantity (`answerKind`), whose answer is not named by its kind ("in what country").
 */
export function askedThing(question: string): string | null {
  const words = question.toLowerCase().match(/[\p{L}\p{N}'’-]+/gu) ?? [];
  const at = words.findIndex((word) => word === 'what' || word === 'which');
  if (at < 0) return null;
  const kindOf = (index: number) => /^(kind|kinds|type|types|sort|sorts|form|forms)$/.test(words[index] ?? '') && words[index + 1] === 'of';
  let start = at + 1;
  let end = start;
  while (end < words.length && end < start + 3 && !notAThing.has(words[end]!)) end++;
  // "What (other) kind of X": the thing is X.
  if (kindOf(end)) {
    start = end + 2;
    end = start;
    while (end < words.length && end < start + 3 && !notAThing.has(words[end]!)) end++;
  }
  // The phrase must end at a word of `notAThing` ("is", "does", "the", "of"), or be one word ending the question: else its head is not known.
  if (end === start || !(notAThing.has(words[end] ?? '') || (end === words.length && end === start + 1))) return null;
  return topicTerms(words[end - 1]!)[0] ?? null;
}

/**
 * Whether a line is a title rather than a sentence: it does not end as a sentence does, and most
 * of its longer words are capitalised ("Condensed Consolidating Statements of Income for the Year
 * Ended December 28, 2019", a page's running header "Acme 2021 Annual Report on Form 10-K").
 */
export function isTitle(text: string): boolean {
  // A company's abbreviated form ends a heading without ending a sentence ("... ACME FOODS, INC.").
  if (/[.!?:;]["'”’)\]]*$/u.test(text.replace(companyForm, ''))) return false;
  const words = text.match(/\p{L}[\p{L}'’-]{3,}/gu) ?? [];
  if (words.length === 0) return false;
  return words.filter((word) => /^\p{Lu}/u.test(word)).length >= 0.6 * words.length;
}

const companyForm = /,?\s*\b(?:inc|corp|co|ltd|llc|plc|l\.p|n\.a|s\.a)\.$/i;

/** A sentence that opens with a pronoun ("It was designed by Ilse Marant", "She was born in Ghent"; not "IT spending", "He-3"). */
const pronounOpening = /^(?:It|Its|He|His|She|Her|They|Their|This|These)\b(?![-\d])/u;

/**
 * "It" that stands for a clause to come, not for a thing before: "It was shown by Ladner that ...",
 * "It is believed that ...", "It turned out that ...", "It is possible to ...". Not "It is a device
 * that ..." or "It was so heavy that ...", whose "that" belongs to what "it" is said to be, nor
 * "It is used to cool ...".
 */
const extraposedIt =
  /^It(?:['’]s|\s+(?:is|was|has been|had been|seems|seemed|appears|appeared|turned out|became|becomes|remains|remained|follows|followed))\s+(?:(?:possible|impossible|necessary|important|hard|difficult|easy|useful|common|rare|usual|unusual)\s+to\b|(?:(?!(?:a|an|the|not|so|such)\s)[\p{L}-]+\s+){0,6}?(?:that|whether)\b)/u;

/**
 * What a sentence that opens with a pronoun is about: the subject and the names of the nearest of
 * the two sentences before it that has either ("The Zephyr-9 reactor is cooled by lead. It was
 * designed by Ilse Marant": the second is about the Zephyr-9 reactor). Empty for other sentences.
 */
export function referentOf(sentences: readonly Sentence[], index: number): string {
  const text = sentences[index]!.text;
  if (!pronounOpening.test(text) || extraposedIt.test(text)) return '';
  for (let before = index - 1; before >= Math.max(0, index - 2); before--) {
    const previous = sentences[before]!.text;
    const referent = [subjectOf(previous), ...namesIn(previous)].filter(Boolean).join(' ');
    if (referent) return referent;
  }
  return '';
}

/** A sentence's subject, when it is the words before its first "is", "was", "has" and the like, within eight words. */
function subjectOf(sentence: string): string {
  if (pronounOpening.test(sentence)) return '';
  return /^((?:\S+\s+){1,8}?)(?:is|was|are|were|has|have|had)\b/u.exec(sentence)?.[1]?.trim() ?? '';
}

/** A sentence whose subject is a person's pronoun names who it is about somewhere else ("it" is often no one: "It was shown by Ladner"). */
export const pronounSubject = /^(he|she|they|his|her|their)\b/i;

// Months as names: "may" and "march" are words too, and "May" opens sentences; one of those is a
// month next to a day or a year, or after a word that places a time ("1 May", "May 1191", "in March").
const monthPattern =
  /\b(?:January|February|April|June|July|August|September|October|November|December)\b|\b(?:\d{1,2}|in|since|until|by|from|early|late|mid)[\s-]+(?:March|May)\b|\b(?:March|May)\s+\d{1,4}\b/u;

/** Numbers written as words: "nineteen fuel assemblies" answers "how many" as "19" would ("one" is too often no number). */
const numberWord = /\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|dozen|dozens|hundreds|thousands|millions|billions)\b/i;

/** Whether a sentence holds something of the kind asked for that the question does not already say. */
export function holdsKind(sentence: string, question: string, kind: AnswerKind): boolean {
  if (kind === 'person' || kind === 'place') return namesIn(sentence).some((name) => !questionMentions(question, name));
  if (kind === 'date') return [...sentence.matchAll(yearPattern)].some(([year]) => !question.includes(year)) || monthPattern.test(sentence);
  const asked = new Set(question.match(/\d[\d,.]*/g) ?? []);
  return (sentence.match(/\d[\d,.]*\d|\d/g) ?? []).some((number) => !asked.has(number)) || (numberWord.test(sentence) && !numberWord.test(question));
}

export const questionMentions = (question: string, name: string) => question.toLowerCase().includes(name.toLowerCase());
