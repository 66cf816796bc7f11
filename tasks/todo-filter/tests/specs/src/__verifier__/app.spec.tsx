import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";

import App from "../App";
import FilterBar from "../FilterBar";

const visibleTitles = () =>
  within(screen.getByRole("list", { name: "Todos" }))
    .queryAllByRole("listitem")
    .map((item) => item.textContent?.trim());

describe("FilterBar", () => {
  it("marks the current filter as pressed and reports changes", async () => {
    const changes: string[] = [];
    render(<FilterBar filter="active" onChange={(f) => changes.push(f)} />);
    expect(screen.getByRole("button", { name: "Active" })).toHaveAttribute("aria-pressed", "true");
    expect(screen.getByRole("button", { name: "All" })).toHaveAttribute("aria-pressed", "false");
    await userEvent.click(screen.getByRole("button", { name: "Completed" }));
    expect(changes).toEqual(["completed"]);
  });
});

describe("App", () => {
  it("starts on All and shows the items left", () => {
    render(<App />);
    expect(screen.getByRole("button", { name: "All" })).toHaveAttribute("aria-pressed", "true");
    expect(visibleTitles()).toHaveLength(3);
    expect(screen.getByText("2 items left")).toBeInTheDocument();
  });

  it("filters by status", async () => {
    render(<App />);
    await userEvent.click(screen.getByRole("button", { name: "Active" }));
    expect(visibleTitles()).toEqual(["Write the release notes", "Plan the next sprint"]);
    await userEvent.click(screen.getByRole("button", { name: "Completed" }));
    expect(visibleTitles()).toEqual(["Review the open pull requests"]);
  });

  it("keeps toggling working under a filter and counts in the singular", async () => {
    render(<App />);
    await userEvent.click(screen.getByRole("button", { name: "Active" }));
    await userEvent.click(screen.getByRole("checkbox", { name: "Write the release notes" }));
    expect(visibleTitles()).toEqual(["Plan the next sprint"]);
    expect(screen.getByText("1 item left")).toBeInTheDocument();
  });
});
