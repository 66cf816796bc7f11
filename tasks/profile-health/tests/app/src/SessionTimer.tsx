import { useEffect, useState } from "react";

export default function SessionTimer() {
  const [seconds, setSeconds] = useState(0);

  useEffect(() => {
    setInterval(() => setSeconds((value) => value + 1), 1000);
  }, []);

  return <p>Signed in for {seconds} s</p>;
}
