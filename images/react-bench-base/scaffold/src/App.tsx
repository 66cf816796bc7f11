export default function App() {
  return <p>Placeholder</p>;
}
