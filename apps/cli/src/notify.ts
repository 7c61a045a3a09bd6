/**
 * "Tell me when it is done": a desktop notification through `node-notifier`
 * (notify-send on Linux, Notification Center on macOS, toasts on Windows) where the desktop
 * offers one; when it does not (no notifier binary, no desktop session, an error, or no answer
 * within 5 s) a terminal bell on stderr instead.
 */
import notifier from 'node-notifier';

/** How the person was told. */
export type Notified = 'desktop' | 'bell';

const NOTIFY_TIMEOUT_MS = 5000;

/** Raises one notification; never throws. */
export function notifyPerson(title: string, message: string): Promise<Notified> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (how: Notified) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (how === 'bell') process.stderr.write('\x07');
      resolve(how);
    };
    const timer = setTimeout(() => done('bell'), NOTIFY_TIMEOUT_MS);
    try {
      notifier.notify({ title, message: message.slice(0, 300) || title, wait: false }, (err) =>
        done(err ? 'bell' : 'desktop'),
      );
    } catch {
      done('bell');
    }
  });
}
