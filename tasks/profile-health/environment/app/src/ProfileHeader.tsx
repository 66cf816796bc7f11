import { useEffect, useState } from "react";

import type { User } from "./types";

export default function ProfileHeader({ user }: { user: User }) {
  const [fullName, setFullName] = useState("");

  useEffect(() => {
    setFullName(`${user.firstName} ${user.lastName}`);
  }, [user.firstName, user.lastName]);

  return <h2>{fullName}</h2>;
}
