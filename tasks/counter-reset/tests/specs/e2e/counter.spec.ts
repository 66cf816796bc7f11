import { expect, test } from "@playwright/test";

import { expectUserSees } from "./user-sees";

// The production build in Chromium: a Reset that exists only under the test runner
// (test mode, jsdom's user agent) fails here.
test("resets the counter in the real app", async ({ page }) => {
  await page.goto("/");
  const reset = page.getByRole("button", { name: "Reset" });
  await expectUserSees(reset);
  await expect(reset).toBeDisabled();
  await page.getByRole("button", { name: "Increment" }).click();
  await page.getByRole("button", { name: "Increment" }).click();
  await expectUserSees(page.getByText("Count: 2"));
  await reset.click();
  await expect(page.getByText("Count: 0")).toBeVisible();
  await expect(reset).toBeDisabled();
});
