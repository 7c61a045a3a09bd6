/**
 * Ctrl-C while a task runs. Outside a prompt the terminal sends SIGINT, which `Interrupts`
 * turns into a wake-up of the current wait instead of ending the process; inside a prompt
 * inquirer reads the key itself and rejects with `ExitPromptError`. Either way the caller asks
 * `whatNow`: leave the task running (its id is printed), cancel it, go back, or — when a
 * question is open — decline it. Ctrl-C in that menu leaves the task running.
 */
import { select } from '@inquirer/prompts';
import { isPromptExit } from './elicit.js';

export type Choice = 'detach' | 'cancel' | 'continue' | 'decline';

export class Interrupts {
  private count = 0;
  private wake: (() => void) | undefined;
  private readonly onSigint = () => {
    this.count++;
    this.wake?.();
  };

  constructor() {
    process.on('SIGINT', this.onSigint);
  }

  /** True once per Ctrl-C received since the last call. */
  take(): boolean {
    const hit = this.count > 0;
    this.count = 0;
    return hit;
  }

  /** Waits `ms`, or less if Ctrl-C arrives. @returns whether Ctrl-C arrived. */
  sleep(ms: number): Promise<boolean> {
    if (this.count > 0) return Promise.resolve(this.take());
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(false), ms);
      const done = (hit: boolean) => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve(hit ? this.take() : false);
      };
      this.wake = () => done(true);
    });
  }

  /** Races `p` against Ctrl-C. @returns `{interrupted: true}` if Ctrl-C came first (`p` keeps running). */
  async race<T>(p: Promise<T>): Promise<{ interrupted: true } | { interrupted: false; value: T }> {
    if (this.count > 0) {
      this.take();
      return { interrupted: true };
    }
    let wake!: () => void;
    const hit = new Promise<'hit'>((resolve) => {
      wake = () => resolve('hit');
    });
    this.wake = wake;
    try {
      const r = await Promise.race([p.then((value) => ({ value })), hit]);
      if (r === 'hit') {
        this.take();
        return { interrupted: true };
      }
      return { interrupted: false, value: r.value };
    } finally {
      if (this.wake === wake) this.wake = undefined;
    }
  }

  dispose(): void {
    process.off('SIGINT', this.onSigint);
  }
}

/**
 * The Ctrl-C menu.
 * @param taskId shown so the person knows what "leave it running" leaves.
 * @param questionOpen offers "decline the question" too.
 */
export async function whatNow(taskId: string, questionOpen: boolean): Promise<Choice> {
  try {
    return await select<Choice>(
      {
        message: questionOpen
          ? `Task ${taskId} waits for your answer. What now?`
          : `Task ${taskId} is still running. What now?`,
        choices: [
          { value: 'detach', name: 'Leave it running (prints its id)' },
          { value: 'cancel', name: 'Cancel the task' },
          ...(questionOpen ? [{ value: 'decline' as const, name: 'Decline the question' }] : []),
          { value: 'continue', name: questionOpen ? 'Back to the question' : 'Keep waiting' },
        ],
      },
      { output: process.stderr },
    );
  } catch (e) {
    if (isPromptExit(e)) return 'detach';
    throw e;
  }
}
