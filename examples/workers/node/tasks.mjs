// The functions a Node task may name: annotations.xlang = {language: "node", function, args}.
// `--module FILE` adds the exports of another module (its names win on a clash).
// Arguments and results are what msgpack carries (numbers, strings, booleans, null, bytes,
// arrays, plain objects); a function may be async.

/** The n-th Fibonacci number (fib(0) = 0, fib(1) = 1), iteratively. */
export function fib(n) {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`fib needs an integer >= 0, got ${n}`);
  let [a, b] = [0, 1];
  for (let i = 0; i < n; i++) [a, b] = [b, a + b];
  return a;
}

/** The sum of the arguments. */
export function add(...xs) {
  return xs.reduce((total, x) => total + x, 0);
}

/** The sum of an array of numbers. */
export function sum(array) {
  if (!Array.isArray(array)) throw new TypeError(`sum needs an array, got ${typeof array}`);
  return array.reduce((total, x) => total + x, 0);
}

/** Throws Error(message): a task that fails. */
export function fail(message) {
  throw new Error(message);
}

/** Resolves to value after ms milliseconds (without blocking the thread). */
export function sleep(ms, value = null) {
  return new Promise((resolve) => setTimeout(() => resolve(value), ms));
}

/** The arrays joined into one. */
export function concat(...arrays) {
  return [].concat(...arrays);
}

/** Its argument, unchanged. */
export function echo(x) {
  return x;
}
