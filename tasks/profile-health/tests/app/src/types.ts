export interface User {
  id: string;
  firstName: string;
  lastName: string;
  tags: string[];
}

export const demoUser: User = {
  id: "u-1",
  firstName: "Ada",
  lastName: "Lovelace",
  tags: ["math", "engines", "poetry"],
};
