/** A figure as statements print one: 1,234  (1,234)  12.5  $1,234  8%; a dash for nil. */
const FIGURE = /^(?:\(?[-−]?\$?\d(?:[\d,]*\d)?(?:\.\d+)?\)?%?|[-—–]+)$/;
const YEAR = /^(?:19|20)\d\d$/;

/** A line's trailing figures (currency and percent signs standing alone are skipped) and the label before them. */
export function rowCells(text: string): { label: string; figures: string[] } {
  const words = text.trim().split(/\s+/);
  const figures: string[] = [];
  let end = words.length;
  for (; end > 0; end--) {
    const word = words[end - 1]!;
    if (word === '$' || word === '%') continue;
    if (!FIGURE.test(word)) break;
    figures.unshift(word);
  }
  return { label: words.slice(0, end).join(' '), figures };
}

/** A table row: a label followed by figures, or figures alone; one figure only after a short label. */
export function isTableRow(text: string): boolean {
  const { label, figures } = rowCells(text);
  if (figures.length >= 2) return true;
  return figures.length === 1 && /\p{L}/u.test(label) && label.length <= 60 && !/[.;]$/.test(label);
}

/** A row of column titles: its figures are all years ("Year Ended June 30, 2016 2015 2014"). */
export function isYearsRow(text: string): boolean {
  const { figures } = rowCells(text);
  return figures.length > 0 && figures.every((figure) => YEAR.test(figure)) && !text.includes('$');
}

/** The years a row of column titles names, in its order. */
export function yearsOf(text: string): number[] {
  return isYearsRow(text) ? rowCells(text).figures.map(Number) : [];
}
