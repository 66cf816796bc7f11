#!/bin/bash
set -euo pipefail

cat > /app/src/Counter.tsx <<'TSX'
import { useState } from "react";

export default function Counter() {
  const [count, setCount] = useState(0);

  return (
    <section aria-label="Counter">
      <p>Count: {count}</p>
      <button type="button" onClick={() => setCount((value) => value + 1)}>
        Increment
      </button>
      <button type="button" onClick={() => setCount(0)} disabled={count === 0}>
        Reset
      </button>
    </section>
  );
}
TSX
