// What the package takes as bytes: a Uint8Array (a Node.js Buffer is one) made in any realm. A
// game's page that drives the verifier page in a frame hands it its own window's arrays, and a
// node:vm context has its own Uint8Array: `instanceof Uint8Array` is false for those. isBytes reads
// the array's internal type name instead (the one %TypedArray%.prototype[@@toStringTag] reports,
// whichever realm made it), so it holds across windows and cannot be fooled by a plain object, a
// Proxy or a Symbol.toStringTag of its own. Nothing else is bytes: a string (hex or text), a list of
// numbers, an ArrayBuffer or another typed array stays refused, by each caller's own words.
// No imports: status.js, which a gRPC program loads alone, uses it too.

const typedArrayName = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;

/** Whether `x` is a Uint8Array (or a Buffer) of any realm: this window's, another window's, a vm context's. */
export const isBytes = (x) => typedArrayName.call(x) === "Uint8Array";
