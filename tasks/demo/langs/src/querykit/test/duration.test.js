const { formatDuration, parseDuration } = require('../src');

describe('formatDuration', () => {
  test('minutes and seconds', () => {
    expect(formatDuration(90)).toBe('1m 30s');
  });

  test('zero', () => {
    expect(formatDuration(0)).toBe('0s');
  });

  test('rejects negative numbers', () => {
    expect(() => formatDuration(-1)).toThrow(RangeError);
  });
});

describe('parseDuration', () => {
  test('reads units', () => {
    expect(parseDuration('1h 30m')).toBe(5400);
    expect(parseDuration('2d')).toBe(172800);
  });
});
