export interface Todo {
  id: number;
  title: string;
  done: boolean;
}

export const initialTodos: Todo[] = [
  { id: 1, title: "Write the release notes", done: false },
  { id: 2, title: "Review the open pull requests", done: true },
  { id: 3, title: "Plan the next sprint", done: false },
];

export function toggleTodo(todos: Todo[], id: number): Todo[] {
  return todos.map((todo) => (todo.id === id ? { ...todo, done: !todo.done } : todo));
}
