import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";

import App from "../App";
import StatusBadge from "../StatusBadge";

describe("StatusBadge", () => {
  it("names itself after its label and tone", () => {
    render(<StatusBadge label="healthy" tone="ok" />);
    const badge = screen.getByRole("status", { name: "healthy (ok)" });
    expect(badge).toHaveAttribute("data-tone", "ok");
    expect(badge).toHaveTextContent("healthy");
  });

  it("is used with the right tones in the app", () => {
    render(<App />);
    expect(screen.getByRole("status", { name: "healthy (ok)" })).toHaveAttribute("data-tone", "ok");
    expect(screen.getByRole("status", { name: "degraded (warning)" })).toHaveAttribute(
      "data-tone",
      "warning",
    );
  });
});
