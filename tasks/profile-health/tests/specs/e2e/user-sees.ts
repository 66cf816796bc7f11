import { expect, type Locator } from "@playwright/test";

// Playwright's toBeVisible() only asks for a box and no `visibility: hidden`: a
// control at opacity 0, clipped away, shrunk to nothing or covered by another
// element passes it, and no user can see or use it. This asks what a user sees.
export async function expectUserSees(locator: Locator): Promise<void> {
  await expect(locator).toBeVisible();
  await locator.scrollIntoViewIfNeeded();
  const problem = await locator.evaluate((element) => {
    for (let node: Element | null = element; node; node = node.parentElement) {
      const style = getComputedStyle(node);
      if (Number(style.opacity) < 0.5) return `opacity ${style.opacity} on <${node.tagName.toLowerCase()}>`;
      if (style.visibility !== "visible") return `visibility ${style.visibility}`;
      if (style.clipPath !== "none" && style.clipPath !== "") return `clip-path on <${node.tagName.toLowerCase()}>`;
      if (/opacity\(0(\.[0-4]\d*)?\)/.test(style.filter)) return `filter ${style.filter}`;
    }
    const box = element.getBoundingClientRect();
    if (box.width < 4 || box.height < 4) return `a ${box.width}x${box.height} box`;
    if (box.right <= 0 || box.bottom <= 0 || box.left >= innerWidth || box.top >= innerHeight) {
      return "outside the viewport";
    }
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    if (!hit || !(hit === element || element.contains(hit))) return "covered by another element";
    return null;
  });
  expect(problem, "what a user sees").toBeNull();
}
