import { expect, test } from "@playwright/test";

// The production build in Chromium, not only the test runner's DOM.
test("shows each deployment's status with its tone", async ({ page }) => {
  await page.goto("/");
  const production = page.getByRole("status", { name: "healthy (ok)" });
  await expect(production).toBeVisible();
  await expect(production).toHaveAttribute("data-tone", "ok");
  await expect(page.getByRole("status", { name: "degraded (warning)" })).toHaveAttribute(
    "data-tone",
    "warning",
  );
});
