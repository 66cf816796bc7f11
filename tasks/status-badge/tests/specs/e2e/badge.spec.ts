import { expect, test } from "@playwright/test";

import { expectUserSees } from "./user-sees";

// The production build in Chromium, not only the test runner's DOM.
test("shows each deployment's status with its tone", async ({ page }) => {
  await page.goto("/");
  const production = page.getByRole("status", { name: "healthy (ok)" });
  await expectUserSees(production);
  await expect(production).toHaveAttribute("data-tone", "ok");
  const staging = page.getByRole("status", { name: "degraded (warning)" });
  await expectUserSees(staging);
  await expect(staging).toHaveAttribute("data-tone", "warning");
});
