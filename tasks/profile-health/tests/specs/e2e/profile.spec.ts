import { expect, test } from "@playwright/test";

import { expectUserSees } from "./user-sees";

// The production build in Chromium: the fixes must not change what users see.
test("shows the profile and counts the session time", async ({ page }) => {
  await page.goto("/");
  await expect(page.getByRole("heading", { level: 2 })).toHaveText("Ada Lovelace");
  await expect(page.getByRole("list", { name: "Tags" }).getByRole("listitem")).toHaveText([
    "math",
    "engines",
    "poetry",
  ]);
  await expect(page.getByText(/Signed in for [1-9]\d* s/)).toBeVisible({ timeout: 5000 });
  await expectUserSees(page.getByText(/Signed in for/));
  await expectUserSees(page.getByRole("heading", { level: 2 }));
});
