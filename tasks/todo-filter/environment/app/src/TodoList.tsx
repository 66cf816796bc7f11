import type { Todo } from "./todos";

interface TodoListProps {
  todos: Todo[];
  onToggle: (id: number) => void;
}

export default function TodoList({ todos, onToggle }: TodoListProps) {
  return (
    <ul aria-label="Todos">
      {todos.map((todo) => (
        <li key={todo.id}>
          <label>
            <input type="checkbox" checked={todo.done} onChange={() => onToggle(todo.id)} />
            {todo.title}
          </label>
        </li>
      ))}
    </ul>
  );
}
