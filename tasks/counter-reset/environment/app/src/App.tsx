import Counter from "./Counter";

export default function App() {
  return (
    <main>
      <h1>Counter</h1>
      <Counter />
    </main>
  );
}
