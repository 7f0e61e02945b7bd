package demo;

import static org.junit.Assert.assertEquals;

import java.util.Arrays;
import org.junit.Test;

public class WordCountTest {
  @Test
  public void countsIgnoringCase() {
    WordCount wc = new WordCount().add("The cat and the hat. THE end!");
    assertEquals(3, wc.count("the"));
    assertEquals(5, wc.distinct());
  }

  @Test
  public void topByFrequency() {
    WordCount wc = new WordCount().add("b b b a a c");
    assertEquals(Arrays.asList("b", "a"), wc.top(2));
  }
}
