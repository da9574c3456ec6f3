package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.Function;

/**
 * One page of {@code GET /v1/runs} or {@code GET /v1/agents}: its items and the cursor of the
 * next page ({@code null} on the last), to pass as {@code after}.
 */
public record ViewPage(List<JsonNode> items, String next) {
    static ViewPage of(JsonNode n) {
        List<JsonNode> items = new ArrayList<>();
        for (JsonNode it : n.path("items")) {
            items.add(it);
        }
        String next = n.path("next").isTextual() && !n.path("next").asText().isEmpty() ? n.path("next").asText() : null;
        return new ViewPage(List.copyOf(items), next);
    }

    /** Every item, page after page as the iteration goes (fetch: after -> page). */
    static Iterable<JsonNode> all(Function<String, ViewPage> fetch) {
        return () -> new Iterator<>() {
            private Iterator<JsonNode> cur = List.<JsonNode>of().iterator();
            private String after;
            private boolean done;

            @Override
            public boolean hasNext() {
                while (!cur.hasNext() && !done) {
                    ViewPage p = fetch.apply(after);
                    cur = p.items().iterator();
                    if (p.next() == null || p.items().isEmpty() || p.next().equals(after)) {
                        done = true;
                    }
                    after = p.next();
                }
                return cur.hasNext();
            }

            @Override
            public JsonNode next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return cur.next();
            }
        };
    }
}
