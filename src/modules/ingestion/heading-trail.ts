/** Tracks the chain of open headings while walking a document in reading order. */
export class HeadingTrail {
  private readonly open: { level: number; text: string }[] = [];

  /** Closes headings at the same or deeper level, opens this one and returns the new path. */
  enter(level: number, text: string): string[] {
    while (this.open.length > 0 && this.open[this.open.length - 1]!.level >= level) this.open.pop();
    this.open.push({ level, text });
    return this.path();
  }

  path(): string[] {
    return this.open.map((heading) => heading.text);
  }
}
