import { useState } from "react";

import TodoList from "./TodoList";
import { initialTodos, toggleTodo } from "./todos";

export default function App() {
  const [todos, setTodos] = useState(initialTodos);

  return (
    <main>
      <h1>Todos</h1>
      <TodoList todos={todos} onToggle={(id) => setTodos((current) => toggleTodo(current, id))} />
    </main>
  );
}
