'use strict';

/**
 * Parses "a=1&b=x%20y" into { a: '1', b: 'x y' }. A key given several times ("t=a&t=b") gives
 * an array. A leading "?" is ignored, and so are empty pairs.
 */
function parse(text) {
  const out = {};
  const query = text.startsWith('?') ? text.slice(1) : text;
  for (const pair of query.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const key = decode(eq < 0 ? pair : pair.slice(0, eq));
    const value = eq < 0 ? '' : decode(pair.slice(eq + 1));
    if (Object.prototype.hasOwnProperty.call(out, key)) {
      out[key] = [].concat(out[key], value);
    } else {
      out[key] = value;
    }
  }
  return out;
}

function decode(text) {
  return decodeURIComponent(text);
}

/** Writes an object as a query string; arrays become repeated keys, null and undefined are left out. */
function stringify(params) {
  const pairs = [];
  for (const key of Object.keys(params)) {
    const value = params[key];
    if (value === undefined || value === null) continue;
    pairs.push(`${encodeURIComponent(key)}=${encodeURIComponent(value)}`);
  }
  return pairs.join('&');
}

module.exports = { parse, stringify };
