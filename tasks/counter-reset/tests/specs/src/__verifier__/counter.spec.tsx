import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";

import Counter from "../Counter";

describe("Counter", () => {
  it("still counts up", async () => {
    render(<Counter />);
    await userEvent.click(screen.getByRole("button", { name: "Increment" }));
    await userEvent.click(screen.getByRole("button", { name: "Increment" }));
    expect(screen.getByText("Count: 2")).toBeInTheDocument();
  });

  it("has a Reset button that is disabled at zero", () => {
    render(<Counter />);
    expect(screen.getByRole("button", { name: "Reset" })).toBeDisabled();
  });

  it("resets the count to zero", async () => {
    render(<Counter />);
    const reset = screen.getByRole("button", { name: "Reset" });
    await userEvent.click(screen.getByRole("button", { name: "Increment" }));
    expect(reset).toBeEnabled();
    await userEvent.click(reset);
    expect(screen.getByText("Count: 0")).toBeInTheDocument();
    expect(reset).toBeDisabled();
  });
});
