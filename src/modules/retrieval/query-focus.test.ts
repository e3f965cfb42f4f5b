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
    expect(focusOf('Acme makes rockets. What is its revenue? Answer briefly.')).toBe('Acme makes rockets. What is its revenue?');
    expect(focusOf('Little Acme and Globex were founded a year apart. Which was first?')).toBe('Little Acme and Globex were founded a year apart. Which was first?');
    expect(focusOf('If Acme had been founded in 1950, who would lead it? If so, who?')).toBe('If Acme had been founded in 1950, who would lead it? If so, who?');
    expect(focusOf('If Acme makes rockets, does Globex? Acme was founded in 1950.')).toBe('If Acme makes rockets, does Globex? Acme was founded in 1950.');
    expect(focusOf('Who founded Acme? Be brief. Where is Globex based?')).toBe('Who founded Acme? Where is Globex based?');
  });

  it('is the whole query when it does not ask, or says nothing but its question', () => {
    expect(focusOf('Revenue growth of Acme in 2019. Please compare with margins.')).toBe('Revenue growth of Acme in 2019. Please compare with margins.');
    expect(focusOf('What do E. B. White and Dan Masterson have in common?')).toBe('What do E. B. White and Dan Masterson have in common?');
    expect(focusOf('  Who founded Acme?  ')).toBe('  Who founded Acme?  ');
  });
});
