import { render, screen } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";

import ProfileHeader from "../ProfileHeader";
import SessionTimer from "../SessionTimer";
import TagList from "../TagList";

// Fake timers before any module of the app loads: a timer function a component
// keeps under another name (`const every = setInterval`) is the fake one too, so
// the cleanup check below sees every timer however it was started.
vi.hoisted(() => {
  vi.useFakeTimers();
});

describe("profile components", () => {

  it("shows the full name on the first render", () => {
    render(<ProfileHeader user={{ id: "x", firstName: "Grace", lastName: "Hopper", tags: [] }} />);
    expect(screen.getByRole("heading", { level: 2 })).toHaveTextContent("Grace Hopper");
  });

  it("keeps tags in order", () => {
    render(<TagList tags={["b", "a", "c"]} />);
    expect(screen.getAllByRole("listitem").map((item) => item.textContent)).toEqual(["b", "a", "c"]);
  });

  it("keeps each tag on its own element when the list changes", () => {
    // Keys that follow the tag, however written: with index keys the element that
    // showed "b" shows another tag once one is put in front.
    const { rerender } = render(<TagList tags={["a", "b"]} />);
    const shown = screen.getByText("b");
    rerender(<TagList tags={["z", "a", "b"]} />);
    expect(screen.getByText("b")).toBe(shown);
    expect(shown.textContent).toBe("b");
  });

  it("stops its timer when it unmounts", () => {
    const { unmount } = render(<SessionTimer />);
    expect(vi.getTimerCount()).toBe(1);
    unmount();
    expect(vi.getTimerCount()).toBe(0);
  });
});
