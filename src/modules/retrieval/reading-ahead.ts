/**
 * The pages of `pages`, the next one asked for while the caller takes the last when `ahead()` says
 * so at that moment: the store then reads while this thread adds. Otherwise a page is asked for
 * only when the caller wants it, so that work waiting for the store (searches) goes between pages.
 */
export async function* readingAhead<Page>(pages: AsyncGenerator<Page>, ahead: () => boolean): AsyncGenerator<Page> {
  try {
    let pending: Promise<IteratorResult<Page>> | undefined = pages.next();
    for (;;) {
      const current: IteratorResult<Page> = await pending!;
      if (current.done) return;
      pending = ahead() ? pages.next() : undefined;
      // Its failure is seen when it is awaited, after the caller took this page.
      pending?.catch(() => undefined);
      yield current.value;
      pending ??= pages.next();
    }
  } finally {
    await pages.return(undefined);
  }
}
