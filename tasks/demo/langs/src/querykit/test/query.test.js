const { parse, stringify } = require('../src');

describe('parse', () => {
  test('reads pairs', () => {
    expect(parse('a=1&b=two')).toEqual({ a: '1', b: 'two' });
  });

  test('ignores a leading question mark and empty pairs', () => {
    expect(parse('?a=1&&b=')).toEqual({ a: '1', b: '' });
  });

  test('repeated keys give arrays', () => {
    expect(parse('t=a&t=b&t=c')).toEqual({ t: ['a', 'b', 'c'] });
  });

  test('decodes percent escapes', () => {
    expect(parse('q=x%20y%26z')).toEqual({ q: 'x y&z' });
  });
});

describe('stringify', () => {
  test('writes pairs and skips null', () => {
    expect(stringify({ a: 1, b: 'x y', c: null })).toBe('a=1&b=x%20y');
  });
});
