import { expect, test } from "@playwright/test";

import { expectUserSees } from "./user-sees";

// Runs against the production build served by `vite preview`, in Chromium: the
// feature must work in the real app, not only under the test runner.
test("filters the todo list and counts what is left", async ({ page }) => {
  await page.goto("/");
  const list = page.getByRole("list", { name: "Todos" });
  await expect(list.getByRole("listitem")).toHaveCount(3);
  await expectUserSees(page.getByText("2 items left"));
  for (const name of ["All", "Active", "Completed"]) {
    await expectUserSees(page.getByRole("button", { name }));
  }

  await page.getByRole("button", { name: "Active" }).click();
  await expect(page.getByRole("button", { name: "Active" })).toHaveAttribute("aria-pressed", "true");
  await expect(list.getByRole("listitem")).toHaveText(["Write the release notes", "Plan the next sprint"]);

  // Under "Active", a todo that is done leaves the list at once.
  await page.getByRole("checkbox", { name: "Plan the next sprint" }).click();
  await expect(list.getByRole("listitem")).toHaveText(["Write the release notes"]);
  await expectUserSees(page.getByText("1 item left"));

  await page.getByRole("button", { name: "Completed" }).click();
  await expect(list.getByRole("listitem")).toHaveCount(2);
});
