'use strict';

const UNITS = [
  ['d', 86400],
  ['h', 3600],
  ['m', 60],
  ['s', 1],
];

/** Formats a number of seconds as "1d 2h 3m 4s", leaving out zero units ("90" -> "1m 30s"). */
function formatDuration(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) {
    throw new RangeError(`not a duration: ${seconds}`);
  }
  let left = Math.round(seconds);
  if (left === 0) return '0s';
  const parts = [];
  for (const [unit, size] of UNITS.slice(1)) {
    const n = Math.floor(left / size);
    if (n > 0) parts.push(`${n}${unit}`);
    left -= n * size;
  }
  return parts.join(' ');
}

/** Reads what formatDuration writes ("1h 30m" -> 5400). */
function parseDuration(text) {
  let total = 0;
  const re = /(\d+)\s*([dhms])/g;
  let match;
  let seen = false;
  while ((match = re.exec(text)) !== null) {
    seen = true;
    total += Number(match[1]) * UNITS.find(([unit]) => unit === match[2])[1];
  }
  if (!seen) throw new SyntaxError(`not a duration: ${JSON.stringify(text)}`);
  return total;
}

module.exports = { formatDuration, parseDuration };
