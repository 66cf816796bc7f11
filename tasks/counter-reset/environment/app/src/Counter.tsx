import { useState } from "react";

export default function Counter() {
  const [count, setCount] = useState(0);

  return (
    <section aria-label="Counter">
      <p>Count: {count}</p>
      <button type="button" onClick={() => setCount((value) => value + 1)}>
        Increment
      </button>
    </section>
  );
}
