#!/bin/bash
set -euo pipefail
cd /app/src

cat > ProfileHeader.tsx <<'TSX'
import type { User } from "./types";

export default function ProfileHeader({ user }: { user: User }) {
  const fullName = `${user.firstName} ${user.lastName}`;

  return <h2>{fullName}</h2>;
}
TSX

cat > TagList.tsx <<'TSX'
export default function TagList({ tags }: { tags: string[] }) {
  return (
    <ul aria-label="Tags">
      {tags.map((tag) => (
        <li key={tag}>{tag}</li>
      ))}
    </ul>
  );
}
TSX

cat > SessionTimer.tsx <<'TSX'
import { useEffect, useState } from "react";

export default function SessionTimer() {
  const [seconds, setSeconds] = useState(0);

  useEffect(() => {
    const timer = setInterval(() => setSeconds((value) => value + 1), 1000);
    return () => clearInterval(timer);
  }, []);

  return <p>Signed in for {seconds} s</p>;
}
TSX
