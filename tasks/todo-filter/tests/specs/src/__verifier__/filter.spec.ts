import { describe, expect, it } from "vitest";

import { filterTodos, type Todo } from "../todos";

const todos: Todo[] = [
  { id: 1, title: "a", done: false },
  { id: 2, title: "b", done: true },
  { id: 3, title: "c", done: false },
];

describe("filterTodos", () => {
  it("keeps everything for all", () => {
    expect(filterTodos(todos, "all").map((t) => t.id)).toEqual([1, 2, 3]);
  });

  it("keeps open todos for active, in order", () => {
    expect(filterTodos(todos, "active").map((t) => t.id)).toEqual([1, 3]);
  });

  it("keeps done todos for completed", () => {
    expect(filterTodos(todos, "completed").map((t) => t.id)).toEqual([2]);
  });

  it("does not mutate its input", () => {
    const copy = structuredClone(todos);
    filterTodos(todos, "active");
    expect(todos).toEqual(copy);
  });
});
