#!/bin/bash
set -euo pipefail
cd /app/src

cat >> todos.ts <<'TS'

export type Filter = "all" | "active" | "completed";

export function filterTodos(todos: Todo[], filter: Filter): Todo[] {
  if (filter === "active") return todos.filter((todo) => !todo.done);
  if (filter === "completed") return todos.filter((todo) => todo.done);
  return todos.slice();
}
TS

cat > FilterBar.tsx <<'TSX'
import type { Filter } from "./todos";

const FILTERS: { value: Filter; label: string }[] = [
  { value: "all", label: "All" },
  { value: "active", label: "Active" },
  { value: "completed", label: "Completed" },
];

interface FilterBarProps {
  filter: Filter;
  onChange: (filter: Filter) => void;
}

export default function FilterBar({ filter, onChange }: FilterBarProps) {
  return (
    <div role="group" aria-label="Filter todos">
      {FILTERS.map(({ value, label }) => (
        <button
          key={value}
          type="button"
          aria-pressed={filter === value}
          onClick={() => onChange(value)}
        >
          {label}
        </button>
      ))}
    </div>
  );
}
TSX

cat > App.tsx <<'TSX'
import { useState } from "react";

import FilterBar from "./FilterBar";
import TodoList from "./TodoList";
import { type Filter, filterTodos, initialTodos, toggleTodo } from "./todos";

export default function App() {
  const [todos, setTodos] = useState(initialTodos);
  const [filter, setFilter] = useState<Filter>("all");
  const left = todos.filter((todo) => !todo.done).length;

  return (
    <main>
      <h1>Todos</h1>
      <FilterBar filter={filter} onChange={setFilter} />
      <TodoList
        todos={filterTodos(todos, filter)}
        onToggle={(id) => setTodos((current) => toggleTodo(current, id))}
      />
      <p role="status">{left === 1 ? "1 item left" : `${left} items left`}</p>
    </main>
  );
}
TSX
