#!/bin/bash
set -euo pipefail
cd /app/src

cat > StatusBadge.tsx <<'TSX'
export type Tone = "ok" | "warning" | "critical";

interface StatusBadgeProps {
  label: string;
  tone: Tone;
}

export default function StatusBadge({ label, tone }: StatusBadgeProps) {
  return (
    <span className="badge" role="status" aria-label={`${label} (${tone})`} data-tone={tone}>
      {label}
    </span>
  );
}
TSX

sed -i 's|<StatusBadge label="healthy" />|<StatusBadge label="healthy" tone="ok" />|; s|<StatusBadge label="degraded" />|<StatusBadge label="degraded" tone="warning" />|' App.tsx
