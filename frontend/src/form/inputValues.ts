/** A form's plain inputs read and written as one record of their values, key by key (the
 * New Run form's free-text fields, the New Sweep form's settings). Pure: anything with a
 * string `value` will do, an `<input>`, `<select>` or `<textarea>` as much as a test's
 * object. */

/** Something holding a string `value`. */
export interface ValueHolder {
  value: string;
}

/** The value of each input, by the key it stands under. */
export function readValues<K extends string>(inputs: Record<K, ValueHolder>): Record<K, string> {
  const out = {} as Record<K, string>;
  for (const key of Object.keys(inputs) as K[]) out[key] = inputs[key].value;
  return out;
}

/** Writes each input's value from `values`, in the inputs' key order; `values` may hold
 * more than the inputs (what the form keeps elsewhere). */
export function writeValues<K extends string>(
  inputs: Record<K, ValueHolder>,
  values: Record<K, string>,
): void {
  for (const key of Object.keys(inputs) as K[]) inputs[key].value = values[key];
}
