import { render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

import ProfileHeader from "../ProfileHeader";
import SessionTimer from "../SessionTimer";
import TagList from "../TagList";

describe("profile components", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("shows the full name on the first render", () => {
    render(<ProfileHeader user={{ id: "x", firstName: "Grace", lastName: "Hopper", tags: [] }} />);
    expect(screen.getByRole("heading", { level: 2 })).toHaveTextContent("Grace Hopper");
  });

  it("keeps tags in order", () => {
    render(<TagList tags={["b", "a", "c"]} />);
    expect(screen.getAllByRole("listitem").map((item) => item.textContent)).toEqual(["b", "a", "c"]);
  });

  it("stops its timer when it unmounts", () => {
    vi.useFakeTimers();
    const { unmount } = render(<SessionTimer />);
    expect(vi.getTimerCount()).toBe(1);
    unmount();
    expect(vi.getTimerCount()).toBe(0);
  });
});
