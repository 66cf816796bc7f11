import { act, render, screen, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import App from "./App";

describe("profile page", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it("shows the user's full name", () => {
    render(<App />);
    expect(screen.getByRole("heading", { level: 2 })).toHaveTextContent("Ada Lovelace");
  });

  it("lists the tags in order", () => {
    render(<App />);
    const items = within(screen.getByRole("list", { name: "Tags" })).getAllByRole("listitem");
    expect(items.map((item) => item.textContent)).toEqual(["math", "engines", "poetry"]);
  });

  it("counts the session time", () => {
    render(<App />);
    act(() => {
      vi.advanceTimersByTime(3000);
    });
    expect(screen.getByText("Signed in for 3 s")).toBeInTheDocument();
  });
});
