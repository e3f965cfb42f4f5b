import { describe, expect, it } from 'vitest';
import { focusOf } from './query-focus.js';

describe('the focus of a query', () => {
  it('leaves out the definitions and instructions around a question', () => {
    const query =
      "What is Acme's FY2017 days payable outstanding (DPO)? DPO is defined as: 365 * (average accounts payable) / (COGS + change in inventory). Round your answer to two decimal places. Address the question by using the balance sheet.";
    expect(focusOf(query)).toBe("What is Acme's FY2017 days payable outstanding (DPO)?");
    expect(focusOf('We need to calculate a metric from the balance sheet. Please answer the following question: what is the net property of Globex (in USD millions)?')).toBe(
      'Please answer the following question: what is the net property of Globex (in USD millions)?',
    );
    expect(focusOf('Does Globex have positive working capital? If working capital is not a relevant metric, then please state that and explain why.')).toBe(
      'Does Globex have positive working capital?',
    );
    expect(focusOf('What is the free cash flow of Globex? FCF here is defined as: (cash from operations - capex). Answer in USD millions.')).toBe('What is the free cash flow of Globex?');
  });

  it('keeps the sentences that set the scene, and every asking sentence, in order', () => {
    // A question that points back and names nothing keeps what it points at, whatever that looks like.
    expect(focusOf('Acme makes rockets. What is its revenue? Answer briefly.')).toBe('Acme makes rockets. What is its revenue? Answer briefly.');
    expect(focusOf('Return on equity rose. What was it in 2020?')).toBe('Return on equity rose. What was it in 2020?');
    expect(focusOf('Little Acme and Globex were founded a year apart. Which was first?')).toBe('Little Acme and Globex were founded a year apart. Which was first?');
    expect(focusOf('If Acme had been founded in 1950, who would lead it? If so, who?')).toBe('If Acme had been founded in 1950, who would lead it? If so, who?');
    expect(focusOf('If Acme makes rockets, does Globex? Acme was founded in 1950.')).toBe('If Acme makes rockets, does Globex? Acme was founded in 1950.');
    expect(focusOf('Who founded Acme? Be brief. Where is Globex based?')).toBe('Who founded Acme? Where is Globex based?');
  });

  it('keeps an instruction that names what the question does not', () => {
    expect(focusOf('Return on equity was 12% in 2019. What was the margin in 2020?')).toBe('Return on equity was 12% in 2019. What was the margin in 2020?');
    expect(focusOf('What is the DPO? Use Amazon’s FY2017 10-K.')).toBe('What is the DPO? Use Amazon’s FY2017 10-K.');
    expect(focusOf('Explain how Acme margins changed. Why?')).toBe('Explain how Acme margins changed. Why?');
    expect(focusOf('State Street grew. Which bank grew most?')).toBe('State Street grew. Which bank grew most?');
    // An instruction that names only what the question names goes, and so does a definition, whatever it names.
    expect(focusOf('What was Acme’s FY2018 DPO? DPO is defined as 365 * (average payables between FY2017 and FY2018) / COGS. Use Acme’s balance sheet.')).toBe(
      'What was Acme’s FY2018 DPO?',
    );
    expect(focusOf('What is the FY2019 cycle of Acme? DSO is defined as: 365 * (average receivables between FY2018 and FY2019) / (FY2019 Revenue).')).toBe(
      'What is the FY2019 cycle of Acme?',
    );
  });

  it('is the whole query when it does not ask, or says nothing but its question', () => {
    expect(focusOf('Revenue growth of Acme in 2019. Please compare with margins.')).toBe('Revenue growth of Acme in 2019. Please compare with margins.');
    expect(focusOf('What do E. B. White and Dan Masterson have in common?')).toBe('What do E. B. White and Dan Masterson have in common?');
    expect(focusOf('  Who founded Acme?  ')).toBe('  Who founded Acme?  ');
    expect(focusOf('Revenue was 12% in 2019. Round it. What was it in 2020?')).toBe('Revenue was 12% in 2019. Round it. What was it in 2020?');
    const long = `What is the revenue of Acme? ${'Round it. '.repeat(1200)}`;
    expect(focusOf(long)).toBe(long);
  });
});
