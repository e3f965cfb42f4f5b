import { describe, expect, it } from 'vitest';
import { checkSentences, sourcesOf, supportScoreOf } from './citations.js';
import { rowStatement } from './extractive-answerer.js';
import { standaloneQuestion } from './follow-up.js';
import { answerKind, askedThing, asksForDoer, holdsKind, isTitle } from './question-kinds.js';
import { GenerationClock, type NumberedPassage } from './answer-model.js';
import { namesIn, sentencesOf } from './text.js';

const passage = (number: number, content: string, documentId = `doc-${number}`): NumberedPassage => ({
  chunkId: `chunk-${number}`,
  documentId,
  filename: `${documentId}.txt`,
  chunkIndex: number,
  content,
  score: 1,
  metadata: {},
  number,
  page: null,
});

const statement = 'CONSOLIDATED STATEMENTS OF OPERATIONS\n(in millions, except per share data)\nYear Ended December 31,\n2015 2016 2017\nTotal net sales 107,006 135,987 177,866\nCost of sales 71,651 88,265 111,934\nNet income $ 596 $ 2,371 $ 3,033';

describe('table rows in answers', () => {
  it('reads each line of a table as a sentence of its own', () => {
    const sentences = sentencesOf(`Sales grew. ${statement}\n\nSee the notes.`);
    expect(sentences.map((sentence) => sentence.text)).toEqual([
      'Sales grew.',
      'CONSOLIDATED STATEMENTS OF OPERATIONS',
      '(in millions, except per share data)',
      'Year Ended December 31,',
      '2015 2016 2017',
      'Total net sales 107,006 135,987 177,866',
      'Cost of sales 71,651 88,265 111,934',
      'Net income $ 596 $ 2,371 $ 3,033',
      'See the notes.',
    ]);
  });

  it('states a row with its label, each figure with its year (the one asked first) and the unit', () => {
    const content = statement;
    const row = 'Cost of sales 71,651 88,265 111,934';
    const at = { text: row, start: content.indexOf(row), passage: passage(1, content) };
    expect(rowStatement('What was the FY2017 cost of sales?', at)).toBe('Cost of sales: 111,934 in 2017, 71,651 in 2015, 88,265 in 2016 (in millions).');
    expect(rowStatement('What was the cost of sales?', at)).toBe('Cost of sales: 71,651 in 2015, 88,265 in 2016, 111,934 in 2017 (in millions).');
    const bare = { text: 'Goodwill 13,923.2 13,995.8', start: 0, passage: passage(2, 'Goodwill 13,923.2 13,995.8') };
    expect(rowStatement('How much goodwill?', bare)).toBe('Goodwill: 13,923.2, 13,995.8.');
  });

  it('tells what kind of thing a question asks for, and whether a sentence holds one', () => {
    expect(answerKind('Who invented the wiki?')).toBe('person');
    expect(answerKind('When was the company founded?')).toBe('date');
    expect(answerKind('Where is the headquarters?')).toBe('place');
    expect(answerKind('How many employees does it have?')).toBe('quantity');
    expect(answerKind('What is the FY2018 capital expenditure amount (in USD millions)?')).toBe('quantity');
    expect(answerKind('Why did revenue fall?')).toBeNull();
    expect(holdsKind('Ward Cunningham invented the wiki in 1994.', 'Who invented the wiki?', 'person')).toBe(true);
    expect(holdsKind('A wiki is a website edited by its users.', 'Who invented the wiki?', 'person')).toBe(false);
    expect(holdsKind('It was founded in March.', 'When was it founded?', 'date')).toBe(true);
    expect(holdsKind('Revenue was 2017 in FY2017.', 'What was revenue in 2017?', 'quantity')).toBe(false);
    expect(holdsKind('Revenue was 177,866 in 2017.', 'What was revenue in 2017?', 'quantity')).toBe(true);
  });

  it('tells a title from a sentence', () => {
    expect(isTitle('The Acme Company Condensed Consolidating Statements of Income For the Year Ended December 28, 2019')).toBe(true);
    expect(isTitle('Acme 2021 Annual Report on Form 10-K')).toBe(true);
    expect(isTitle('Acme Reports First-Quarter 2023 Results; Raises Full-Year')).toBe(true);
    expect(isTitle('Ward Cunningham invented the wiki in 1994')).toBe(false);
    expect(isTitle('The Acme Company Reported Record Revenue.')).toBe(false);
    expect(isTitle('Notes to Consolidated Financial Statements ACME FOODS, INC.')).toBe(true);
    expect(isTitle('The notes were issued by Acme Foods, Inc.')).toBe(false);
    expect(isTitle('中文标题没有大写')).toBe(false);
  });

  it('tells the thing a what/which question asks for, when a verb ends the phrase that names it', () => {
    expect(askedThing('What kind of arches does Norman architecture have?')).toBe('arch');
    expect(askedThing('What tradition were the monks known for?')).toBe('tradit');
    expect(askedThing('What theoretical device is attributed to Alan Turing?')).toBe('devic');
    expect(askedThing('In which city is the plant?')).toBe('citi');
    expect(askedThing('A resource can also be described as what other type of resource?')).toBe('resourc');
    // No verb where one is expected: the phrase's head is not known.
    expect(askedThing('Which company makes rockets?')).toBeNull();
    expect(askedThing('What is the expression used to identify it?')).toBeNull();
    expect(askedThing('Who founded the company?')).toBeNull();
  });
});

describe('sentencesOf', () => {
  it('gives each sentence with offsets that cut exactly it out of the text, whatever the text', () => {
    const pieces = ['Dr. Smith went home.', '\n\n', '# Heading', '\n', 'Ünïcödé — “quoted.”', ' ', '日本語の文です。', '  ', 'x'.repeat(1500), ' ', 'e.g. 3.14 is pi!', '\u0000', '\ud83d\ude00 ok?'];
    for (let round = 0; round < 200; round += 1) {
      const text = Array.from({ length: 1 + (round % 9) }, (_, index) => pieces[(round * 7 + index * 3) % pieces.length]).join('');
      for (const sentence of sentencesOf(text)) {
        expect(text.slice(sentence.start, sentence.end)).toBe(sentence.text);
        expect(sentence.text).toBe(sentence.text.trim());
        expect(sentence.text.length).toBeLessThanOrEqual(600);
      }
    }
  });

  it('ends a sentence at a blank line: headings and list items stand alone', () => {
    expect(sentencesOf('Revenue\n\nRevenue rose by 12 percent. Costs fell.').map((sentence) => sentence.text)).toEqual(['Revenue', 'Revenue rose by 12 percent.', 'Costs fell.']);
  });
});

describe('namesIn and follow-ups', () => {
  it('finds runs of capitalised words, not question words or a sentence opener', () => {
    expect(namesIn('Which university did the author of The Hobbit attend?')).toEqual(['The Hobbit']);
    expect(namesIn('Where was the designer of the Zephyr-9 reactor born?')).toEqual(['Zephyr-9']);
    expect(namesIn('It was designed by Ilse Marant (a Belgian engineer), in Ghent.')).toEqual(['Ilse Marant', 'Belgian', 'Ghent']);
  });

  it('makes a follow-up stand alone from the previous question', () => {
    const history = [{ role: 'user' as const, content: 'Where does Lyft have its headquarters?' }, { role: 'assistant' as const, content: 'In San Francisco [1].' }];
    expect(standaloneQuestion('and its revenue?', history)).toBe("Lyft's revenue?");
    expect(standaloneQuestion('How many riders did it have?', history)).toBe('How many riders did Lyft have?');
    expect(standaloneQuestion('Who founded Uber?', history)).toBe('Who founded Uber?');
    expect(standaloneQuestion('and its revenue?', [])).toBe('and its revenue?');
  });

  it('replaces the pronoun as a word, not the same letters inside another word', () => {
    const history = [
      { role: 'user' as const, content: 'Who designed the Zephyr-9 reactor?' },
      { role: 'assistant' as const, content: 'It was designed by Ilse Marant [1].' },
    ];
    expect(standaloneQuestion('Where was he born?', history)).toBe('Where was Ilse Marant born?');
    expect(standaloneQuestion('When did she design the thermostat?', history)).toBe('When did Ilse Marant design the thermostat?');
    expect(standaloneQuestion('Where is its core?', history)).toBe("Where is Zephyr-9's core?");
  });
});

describe('checkSentences and sourcesOf', () => {
  const passages = [passage(1, 'Intro line here. The reactor is cooled by liquid lead. It has nineteen fuel assemblies.'), passage(2, 'Ilse Marant was born in Ghent in 1961.')];

  it('supports a sentence whose cited passage holds its words, and quotes the closest sentence verbatim', () => {
    const checked = checkSentences('The reactor is cooled by liquid lead [1]. Its designer studied physics in Leuven [2].', passages);
    expect(checked.map((sentence) => [sentence.citations, sentence.supported])).toEqual([
      [[1], true],
      [[2], false],
    ]);
    expect(supportScoreOf(checked)).toBe(0.5);
    const sources = sourcesOf(checked, passages);
    expect(sources.map((source) => source.documentId)).toEqual(['doc-1', 'doc-2']);
    const quoted = sources[0]!.passages[0]!;
    expect(quoted).toMatchObject({ citation: 1, quote: 'The reactor is cooled by liquid lead.' });
    expect(passages[0]!.content.slice(quoted.start, quoted.end)).toBe(quoted.quote);
  });

  it('gives no support to an uncited claim or a citation of a passage that was not retrieved', () => {
    const checked = checkSentences('The reactor is cooled by liquid lead. The moon is made of cheese [7].', passages);
    expect(checked.map((sentence) => sentence.supported)).toEqual([false, false]);
    expect(sourcesOf(checked, passages)).toEqual([]);
  });
});

describe('citations after closing quotes of other languages', () => {
  it('keeps a quoted sentence whole and supported, whatever quote closes it', async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    const sentences = ['Der Vorstand der Nordbahn sagte: „Die Nordbahn eröffnet 2031 eine Strecke nach Kiel.“', 'Le directeur a déclaré : « Lumina ouvrira une usine en 2029. »', 'Plain sentence about the Velora plant opening in 2027.\u200f'];
    const passages = sentences.map((content, index) => passage(index + 1, content));
    for (const [index, text] of sentences.entries()) {
      // What the extractive answerer writes: the sentence with its marker before the closing punctuation.
      const fake = { embed: async (texts: readonly string[]) => texts.map(() => Float32Array.of(1)), modelId: 'x', dimensions: 1, close: async () => {} };
      const answerer = createExtractiveAnswerer(fake);
      const scored = await answerer.scoreSentences(text, [passages[index]!], AbortSignal.timeout(1000));
      // French puts a space before «»: the segmenter ends the sentence at its full stop.
      expect(text.startsWith(scored[0]!.text)).toBe(true);
      let answer = '';
      for await (const token of answerer.answer({ question: text, passages: [passages[index]!], mode: 'fast', signal: AbortSignal.timeout(1000), clock: new GenerationClock() })) answer += token;
      const checked = checkSentences(answer, passages);
      expect(checked, answer).toHaveLength(1);
      expect(checked[0]).toMatchObject({ citations: [index + 1], supported: true });
      expect(sourcesOf(checked, passages)[0]!.passages[0]!.quote).toBe(scored[0]!.text);
    }
  });
});

describe("the extractive answerer's words", () => {
  it("counts the question's words that the passage's document name holds as held by each of its sentences", async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    // Every sentence equally similar: the words and the passage's rank decide.
    const flat = { embed: async (texts: readonly string[]) => texts.map(() => Float32Array.of(1)), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(flat);
    const row = 'Purchases of equipment were 900 million for the year.';
    const passages = [
      { ...passage(1, row, 'GLOBEX_2019_10K'), filename: 'GLOBEX_2019_10K.pdf', metadata: { title: 'Globex annual report' } },
      { ...passage(2, row.replace('900', '1,200'), 'ACME_2018_10K'), filename: 'ACME_2018_10K.pdf', metadata: { title: 'Acme annual report' } },
    ];
    const scored = await answerer.scoreSentences("What were Acme's FY2018 purchases of equipment?", passages, AbortSignal.timeout(1000));
    expect(scored[0]!.passage.filename).toBe('ACME_2018_10K.pdf');
    expect(scored[0]!.lexical).toBeGreaterThan(scored[1]!.lexical);
    // A name the question does not use changes nothing: the better-ranked passage comes first.
    const other = await answerer.scoreSentences('What were the purchases of equipment?', passages, AbortSignal.timeout(1000));
    expect(other[0]!.passage.filename).toBe('GLOBEX_2019_10K.pdf');
  });

  it("embeds each sentence with its document's name when the passages come from documents of different names", async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    const embedded: string[] = [];
    const recording = { embed: async (texts: readonly string[]) => (embedded.push(...texts), texts.map(() => Float32Array.of(1))), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(recording);
    const marant = { ...passage(1, 'She was born in Ghent in 1961.', 'marant'), filename: 'Ilse%20Marant.txt' };
    const other = { ...passage(2, 'He was born in Paris in 1950.', 'other'), filename: 'Jan_Peeters.txt' };
    await answerer.scoreSentences('Where was Ilse Marant born?', [marant, other], AbortSignal.timeout(1000));
    expect(embedded).toEqual(expect.arrayContaining(['Ilse Marant\nShe was born in Ghent in 1961.', 'Jan Peeters\nHe was born in Paris in 1950.']));
    // Passages of one document: the name would be the same words in front of every sentence.
    embedded.length = 0;
    const sameDocument = { ...passage(3, 'Her first design was a reactor.', 'marant'), filename: 'Ilse%20Marant.txt' };
    await answerer.scoreSentences('Where was Ilse Marant born?', [marant, sameDocument], AbortSignal.timeout(1000));
    expect(embedded).toEqual(expect.arrayContaining(['She was born in Ghent in 1961.', 'Her first design was a reactor.']));
  });

  it('reads a sentence that opens with a pronoun as about the subject and names of the sentence before it, unless its "it" stands for a clause', async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    const flat = { embed: async (texts: readonly string[]) => texts.map(() => Float32Array.of(1)), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(flat);
    const reactor = passage(1, 'The Zephyr-9 reactor is cooled by liquid lead. It was designed by Ilse Marant.');
    const [best] = await answerer.scoreSentences('Who designed the Zephyr-9 reactor?', [reactor], AbortSignal.timeout(1000));
    expect(best!.text).toBe('It was designed by Ilse Marant.');
    // The sentence before it: its subject ("The Zephyr-9 reactor") and its names.
    expect(best!.terms.has('zephyr')).toBe(true);
    expect(best!.terms.has('reactor')).toBe(true);
    const ladner = passage(2, 'Problems in NP were studied by Karp. It was shown by Ladner that some problems are neither.');
    const scored = await answerer.scoreSentences('Who showed it?', [ladner], AbortSignal.timeout(1000));
    expect(scored.find((sentence) => sentence.text.startsWith('It was shown'))!.terms.has('karp')).toBe(false);
  });

  it('takes "it" for a clause to come only where it is one, and a pronoun only as a word', async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    const flat = { embed: async (texts: readonly string[]) => texts.map(() => Float32Array.of(1)), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(flat);
    const referring = ['It is a device that reads tapes.', 'It was so heavy that it sank.', 'It is used to cool the core.', 'It was sold to Microsoft.'];
    const extraposed = ["It's believed that the core melted.", 'It turned out that the core melted.', 'It is possible to show that the core melted.'];
    const notPronouns = ['IT spending rose in every quarter.', 'He-3 is rare on the planet.'];
    for (const text of [...referring, ...extraposed, ...notPronouns]) {
      const scored = await answerer.scoreSentences('Who built it?', [passage(1, `Ilse Marant built the Zephyr-9 reactor. ${text}`)], AbortSignal.timeout(1000));
      const sentence = scored.find((candidate) => candidate.text === text)!;
      expect(sentence.terms.has('zephyr'), text).toBe(referring.includes(text));
    }
  });

  it('counts a number written as a word as the quantity a how-many question asks for, and months only as dates', () => {
    expect(holdsKind('Its core holds nineteen fuel assemblies.', 'How many fuel assemblies does the core hold?', 'quantity')).toBe(true);
    expect(holdsKind('Its core holds the fuel assemblies.', 'How many fuel assemblies does the core hold?', 'quantity')).toBe(false);
    expect(holdsKind('The fleet sailed on 1 May.', 'When did the fleet sail?', 'date')).toBe(true);
    expect(holdsKind('The fleet may sail at dawn, weather permitting.', 'When did the fleet sail?', 'date')).toBe(false);
    expect(holdsKind('May we march on, the captain asked.', 'When did the fleet sail?', 'date')).toBe(false);
  });

  it('leads with the sentence that holds the year a when-question asks for', async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    const flat = { embed: async (texts: readonly string[]) => texts.map(() => Float32Array.of(1)), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(flat);
    const voyage = passage(1, 'A storm hit the fleet and scattered its ships. After the storm the fleet reached Limassol on 1 May 1191.');
    const question = 'What year did the storm hit the fleet?';
    const [best] = await answerer.scoreSentences(question, [voyage], AbortSignal.timeout(1000));
    expect(best!.text).toBe('A storm hit the fleet and scattered its ships.');
    let answer = '';
    for await (const token of answerer.answer({ question, passages: [voyage], mode: 'fast', signal: AbortSignal.timeout(1000), clock: new GenerationClock() })) answer += token;
    expect(answer).toBe('After the storm the fleet reached Limassol on 1 May 1191 [1]. A storm hit the fleet and scattered its ships [1].');
  });

  it('leads a who-did-it answer with the sentence that names the doer, not one whose doer is a pronoun', async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    expect(asksForDoer('Who made Ralph earl?')).toBe(true);
    expect(asksForDoer('Who was the Norse leader?')).toBe(true);
    expect(asksForDoer('Who did Edward make archbishop?')).toBe(false);
    expect(asksForDoer('To whom was the abbey given?')).toBe(false);
    const flat = { embed: async (texts: readonly string[]) => texts.map(() => Float32Array.of(1)), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(flat);
    const court = passage(1, 'The king was at Westminster. He made Ralph the Timid earl of Hereford.');
    const marches = passage(2, 'Edward the Confessor had set up Ralph as earl of Hereford to defend the Marches.');
    const answerTo = async (question: string) => {
      let answer = '';
      for await (const token of answerer.answer({ question, passages: [court, marches], mode: 'fast', signal: AbortSignal.timeout(1000), clock: new GenerationClock() })) answer += token;
      return answer;
    };
    const [best] = await answerer.scoreSentences('Who made Ralph earl?', [court, marches], AbortSignal.timeout(1000));
    expect(best!.text).toBe('He made Ralph the Timid earl of Hereford.');
    expect(await answerTo('Who made Ralph earl?')).toBe(
      'Edward the Confessor had set up Ralph as earl of Hereford to defend the Marches [2]. He made Ralph the Timid earl of Hereford [1].',
    );
    // Asked whom he made earl, the sentence with the pronoun answers: it stays first.
    expect((await answerTo('Who did the king make earl of Hereford?')).startsWith('He made Ralph the Timid earl of Hereford [1].')).toBe(true);
  });

  it("judges a table row by its table's title and its label, not by its figures", async () => {
    const { createExtractiveAnswerer } = await import('./extractive-answerer.js');
    const embedded: string[] = [];
    const recording = { embed: async (texts: readonly string[]) => (embedded.push(...texts), texts.map(() => Float32Array.of(1))), modelId: 'x', dimensions: 1, close: async () => {} };
    const answerer = createExtractiveAnswerer(recording);
    const content = `Sales grew in every region.\n\n${statement}`;
    const scored = await answerer.scoreSentences('What was the cost of sales in 2017?', [passage(1, content)], AbortSignal.timeout(1000));
    const title = 'CONSOLIDATED STATEMENTS OF OPERATIONS (in millions, except per share data) Year Ended December 31, 2015 2016 2017';
    expect(scored.find((sentence) => sentence.text.startsWith('Cost of sales'))!.about).toBe(`${title} Cost of sales`);
    expect(embedded).toContain(`${title} Total net sales`);
    // The paragraph before the blank line is not the table's title.
    expect(embedded.some((text) => text.includes('Sales grew') && text.includes('Net income'))).toBe(false);
  });
});
