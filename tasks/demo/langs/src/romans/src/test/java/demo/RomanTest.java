package demo;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import org.junit.Test;

public class RomanTest {
  @Test
  public void simpleNumerals() {
    assertEquals("III", Roman.toRoman(3));
    assertEquals("MDCLXVI", Roman.toRoman(1666));
  }

  @Test
  public void subtractiveNumerals() {
    assertEquals("MCMXCIV", Roman.toRoman(1994));
    assertEquals("XLIX", Roman.toRoman(49));
  }

  @Test
  public void outOfRange() {
    assertThrows(IllegalArgumentException.class, () -> Roman.toRoman(0));
    assertThrows(IllegalArgumentException.class, () -> Roman.toRoman(4000));
  }

  @Test
  public void parsesAdditiveNumerals() {
    assertEquals(3, Roman.fromRoman("III"));
    assertEquals(1666, Roman.fromRoman("mdclxvi"));
  }
}
