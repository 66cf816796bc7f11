// Checked by `tsc --noEmit` before the specs run: the tone is a closed union.
import type { ComponentProps } from "react";

import type StatusBadge from "../StatusBadge";
import type { Tone } from "../StatusBadge";

type Props = ComponentProps<typeof StatusBadge>;

export const tones: Tone[] = ["ok", "warning", "critical"];
export const valid: Props = { label: "x", tone: "critical" };
// @ts-expect-error: an unknown tone is a type error
export const unknownTone: Props = { label: "x", tone: "purple" };
// @ts-expect-error: the tone is required
export const missingTone: Props = { label: "x" };
