package demo;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** Counts words in text, ignoring case and punctuation. */
public final class WordCount {
  private final Map<String, Integer> counts = new HashMap<>();

  public WordCount add(String text) {
    for (String word : text.toLowerCase(Locale.ROOT).split("[^\\p{L}\\p{N}']+")) {
      if (!word.isEmpty()) {
        counts.merge(word, 1, Integer::sum);
      }
    }
    return this;
  }

  public int count(String word) {
    return counts.getOrDefault(word.toLowerCase(Locale.ROOT), 0);
  }

  public int distinct() {
    return counts.size();
  }

  /** The {@code n} most frequent words, most frequent first; ties in alphabetical order. */
  public List<String> top(int n) {
    List<Map.Entry<String, Integer>> entries = new ArrayList<>(counts.entrySet());
    entries.sort((a, b) -> b.getValue() - a.getValue());
    List<String> out = new ArrayList<>();
    for (int i = 0; i < n && i < entries.size(); i++) {
      out.add(entries.get(i).getKey());
    }
    return out;
  }
}
