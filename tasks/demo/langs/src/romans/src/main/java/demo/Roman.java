package demo;

/** Roman numerals from 1 to 3999. */
public final class Roman {
  private static final int[] VALUES = {1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 1};
  private static final String[] SYMBOLS = {
    "M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "I"
  };

  private Roman() {}

  /** The numeral for {@code n}, e.g. 1994 -> "MCMXCIV". */
  public static String toRoman(int n) {
    if (n < 1 || n > 3999) {
      throw new IllegalArgumentException("out of range: " + n);
    }
    StringBuilder out = new StringBuilder();
    for (int i = 0; i < VALUES.length; i++) {
      while (n >= VALUES[i]) {
        out.append(SYMBOLS[i]);
        n -= VALUES[i];
      }
    }
    return out.toString();
  }

  /** The value of a numeral, e.g. "XIV" -> 14; case does not matter. */
  public static int fromRoman(String numeral) {
    String s = numeral.toUpperCase();
    int total = 0;
    for (int i = 0; i < s.length(); i++) {
      total += value(s.charAt(i));
    }
    return total;
  }

  static int value(char c) {
    switch (c) {
      case 'I': return 1;
      case 'V': return 5;
      case 'X': return 10;
      case 'L': return 50;
      case 'C': return 100;
      case 'D': return 500;
      case 'M': return 1000;
      default: throw new IllegalArgumentException("not a roman digit: " + c);
    }
  }
}
