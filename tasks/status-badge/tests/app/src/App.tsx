import StatusBadge from "./StatusBadge";

export default function App() {
  return (
    <main>
      <h1>Deployments</h1>
      <p>
        production <StatusBadge label="healthy" />
      </p>
      <p>
        staging <StatusBadge label="degraded" />
      </p>
    </main>
  );
}
